"""The FAKE Kubernetes API server, one concern a module; tests import it as `fake_apiserver`."""
