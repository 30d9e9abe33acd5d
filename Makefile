# upi: `make demo` renders the example inventory; `make test` installs what the
# tests need (Debian packages when root, a virtualenv) and runs lint + tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_OUT ?= out/dgxpod

# Real programs the tests run (reference/test-harness.md, pxe-boot-test.md).
APT_PACKAGES := dnsmasq-base haproxy openssh-server openssh-client libvirt-dev pkg-config \
	virtinst busybox-static qemu-system-x86 ipxe-qemu pxelinux syslinux-common ovmf \
	grub-efi-amd64-bin grub-common iproute2 bind9-dnsutils curl cpio nginx firewalld shellcheck docker-registry
APT_PROGRAMS := dnsmasq haproxy sshd virt-install qemu-system-x86_64 grub-mkimage dig busybox ip nginx firewall-offline-cmd shellcheck docker-registry
# The PXE tests also `apt-get download` a Debian kernel (not installed) and
# cache it under $${XDG_CACHE_HOME:-~/.cache}/upi-test (tests/pxe_harness.py).
PXE_FILES := /usr/lib/PXELINUX/pxelinux.0 /usr/lib/syslinux/modules/bios/ldlinux.c32 \
	/usr/share/OVMF/OVMF_CODE.fd /usr/share/OVMF/OVMF_VARS.fd /usr/lib/grub/x86_64-efi/linux.mod

.PHONY: demo test lint unit pxe system-deps venv bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,libvirt]'
	touch $@

venv: $(VENV)/.installed

# apt-get only when root and something is missing: a fresh CI machine installs,
# a warm one skips in milliseconds.
system-deps:
	@missing=0; for p in $(APT_PROGRAMS); do \
	  command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || missing=1; done; \
	for f in $(PXE_FILES); do [ -f $$f ] || missing=1; done; \
	if [ $$missing = 1 ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing test programs with apt-get"; \
	    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -q --no-install-recommends $(APT_PACKAGES) >/dev/null; \
	  else echo "not root: install these Debian packages yourself: $(APT_PACKAGES)"; fi; \
	fi

demo: venv
	$(BIN)/upi validate inventories/dgxpod.yaml
	$(BIN)/upi render inventories/dgxpod.yaml -o $(DEMO_OUT) --force
	@echo "rendered into $(DEMO_OUT); see docs/ for what each file is"

lint: venv
	$(BIN)/ruff check upi tests bench
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q

test: system-deps venv lint unit

# Only the network-boot tests (root; about 1.5 minutes): docs/testing.md.
pxe: system-deps venv
	$(BIN)/pytest -q -m pxe

bench: venv system-deps
	$(BIN)/python bench/run.py

docs: venv
	$(BIN)/python -m upi.docgen > docs/cli.md

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
