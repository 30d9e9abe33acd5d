# upi: `make demo` renders the example inventory; `make test` installs what the
# tests need (Debian packages when root, a virtualenv) and runs lint + tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_OUT ?= out/dgxpod

# Debian packages, one a line. `make demo` needs only `python3 -m venv`, which
# Debian ships apart from python3.
VENV_PACKAGES := \
	python3-venv
# `make test` also builds the libvirt extra: libvirt-python is a source package
# that compiles against libvirt.
BUILD_PACKAGES := \
	python3-dev \
	gcc \
	pkg-config \
	libvirt-dev
# kubectl (tests/test_approve_csr.py): Debian 12's kubernetes-client (1.20) only
# where no kubectl is installed; it conflicts with the kubectl package of
# Kubernetes' own repository.
KUBECTL_PACKAGE := $(if $(shell command -v kubectl),,kubernetes-client)
# Real programs the tests run (reference/test-harness.md, pxe-boot-test.md).
TEST_PACKAGES := \
	dnsmasq-base \
	haproxy \
	openssh-server \
	openssh-client \
	virtinst \
	busybox-static \
	qemu-system-x86 \
	ipxe-qemu \
	pxelinux \
	syslinux-common \
	ovmf \
	shim-signed \
	grub-efi-amd64-signed \
	xorriso \
	mtools \
	dosfstools \
	grub-efi-amd64-bin \
	grub-common \
	iproute2 \
	bind9-dnsutils \
	curl \
	cpio \
	nginx \
	firewalld \
	netbase \
	shellcheck \
	network-manager \
	docker-registry \
	$(KUBECTL_PACKAGE)
APT_PACKAGES := $(VENV_PACKAGES) $(BUILD_PACKAGES) $(TEST_PACKAGES)
APT_PROGRAMS := dnsmasq haproxy sshd virt-install qemu-system-x86_64 grub-mkimage dig busybox ip nginx \
	firewall-offline-cmd kubectl shellcheck docker-registry \
	xorriso mcopy mmd mkfs.fat
# The PXE tests also `apt-get download` a Debian kernel (not installed) and
# cache it under $${XDG_CACHE_HOME:-~/.cache}/upi-test (tests/pxe_harness.py).
PXE_FILES := /usr/lib/PXELINUX/pxelinux.0 /usr/lib/syslinux/modules/bios/ldlinux.c32 \
	/usr/share/OVMF/OVMF_CODE.fd /usr/share/OVMF/OVMF_VARS.fd /usr/lib/grub/x86_64-efi/linux.mod \
	/usr/share/OVMF/OVMF_CODE_4M.secboot.fd /usr/share/OVMF/OVMF_VARS_4M.ms.fd \
	/usr/lib/shim/shimx64.efi.signed /usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed
# firewall-offline-cmd resolves protocols (esp) in /etc/protocols: netbase, which
# minimal Debian images (debootstrap minbase, the debian:12 container) lack.
TEST_FILES := $(PXE_FILES) /etc/protocols /usr/lib/NetworkManager/nm-initrd-generator

# Presence checks: each prints what is missing, one item a line (nothing: all there).
define missing_venv
$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || echo "Python 3.11 or later (PYTHON=$(PYTHON) is older, or absent)"; \
$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || echo "$(PYTHON) -m venv (ensurepip)"
endef
define missing_build
$(missing_venv); \
command -v gcc >/dev/null 2>&1 || echo "program gcc"; \
command -v pkg-config >/dev/null 2>&1 || echo "program pkg-config"; \
pkg-config --exists libvirt 2>/dev/null || echo "pkg-config libvirt (libvirt-dev)"; \
inc=$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("INCLUDEPY"))' 2>/dev/null); \
[ -n "$$inc" ] && [ -f "$$inc/Python.h" ] || echo "$${inc:-the include dir of $(PYTHON)}/Python.h"
endef
define missing_test
$(missing_build); \
for p in $(APT_PROGRAMS); do \
  command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || echo "program $$p"; done; \
for f in $(TEST_FILES); do [ -f $$f ] || echo "file $$f"; done
endef

# $(call apt,CHECK,PACKAGES,NEEDED): apt-get only when root and CHECK finds something
# missing: a fresh machine installs, a warm one skips in milliseconds. Not root,
# it prints the one apt-get line to run; then it fails if the NEEDED check finds
# something missing (the venv could not be built) or under CI=true.
define apt
@missing=$$($(1)); \
if [ -n "$$missing" ]; then \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
    echo "installing with apt-get (missing: $$(echo "$$missing" | paste -sd ';' | sed 's/;/; /g'))"; \
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends $(2) >/dev/null || exit 1; \
    missing=$$($(1)); \
    [ -z "$$missing" ] || { echo "still missing after apt-get:"; echo "$$missing" | sed 's/^/  /'; exit 1; }; \
  else \
    echo "missing:"; echo "$$missing" | sed 's/^/  /'; \
    echo "install them as root with:"; \
    echo "  apt-get install -y --no-install-recommends $(strip $(2))"; \
    if [ "$${CI:-}" = true ] || [ -n "$$($(3))" ]; then exit 1; fi; \
    echo "going on: the tests that need them say so and are skipped"; \
  fi; \
fi
endef

.PHONY: demo test lint unit pxe system-deps venv-deps build-deps venv bench docs clean

# Every prerequisite of `make test`: build tools, libvirt's headers, test programs.
system-deps:
	$(call apt,$(missing_test),$(APT_PACKAGES),$(missing_build))

# What `python3 -m venv` needs (python3-venv on Debian).
venv-deps:
	$(call apt,$(missing_venv),$(VENV_PACKAGES),$(missing_venv))

# What compiling the libvirt extra needs.
build-deps:
	$(call apt,$(missing_build),$(VENV_PACKAGES) $(BUILD_PACKAGES),$(missing_build))

$(BIN)/python:
	@$(MAKE) --no-print-directory venv-deps
	$(PYTHON) -m venv $(VENV)

# Two stamps: upi alone (no compiler needed) for `make demo`; with the dev and
# libvirt extras for everything else. `make demo` then `make test` upgrades the venv.
$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@$(MAKE) --no-print-directory build-deps
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,libvirt]'
	touch $(VENV)/.base $@

venv: $(VENV)/.installed

demo: $(VENV)/.base
	$(BIN)/upi validate inventories/dgxpod.yaml
	$(BIN)/upi render inventories/dgxpod.yaml -o $(DEMO_OUT) --force
	@echo "rendered into $(DEMO_OUT); see docs/ for what each file is"

lint: venv
	$(BIN)/ruff check upi tests bench
	$(BIN)/mypy

# The suite mostly waits (servers' deadlines, health checks, emulated BMCs, qemu boots):
# TEST_WORKERS pytest processes run it side by side, each test file whole in one of them
# (its module fixtures are set up once): two nearly halve the suite on two cores, since it
# mostly waits (docs/testing.md). TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 2
# More pytest options, e.g. PYTEST_ARGS=--group-times (the seconds of each group of files).
PYTEST_ARGS ?=
unit: venv
	$(BIN)/pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

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
