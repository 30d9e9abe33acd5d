#!/bin/sh
# The control-plane VMs of edge.lab.example.com as virt-install commands (written by upi).
# Each VM network-boots its per-MAC PXE file, installs RHCOS and powers off;
# start it again with `virsh start NAME` (or let `upi boot-vms --watch` do it).
# No `--boot network,...`: with `--pxe` alone virt-install network-boots only the
# install phase and the defined domain boots from disk, so a restart cannot re-PXE.
set -eu

virt-install --connect qemu:///system --name bootstrap \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/edge-bootstrap.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=virbr1,mac=52:54:00:7a:00:09,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name cp-0 \
  --memory 32768 --vcpus 8 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/edge-cp-0.qcow2,size=120,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=virbr1,mac=52:54:00:7a:00:11,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name cp-1 \
  --memory 32768 --vcpus 8 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/edge-cp-1.qcow2,size=120,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=virbr1,mac=52:54:00:7a:00:12,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name cp-2 \
  --memory 32768 --vcpus 8 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/edge-cp-2.qcow2,size=120,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=virbr1,mac=52:54:00:7a:00:13,model=virtio \
  --boot loader=/usr/share/OVMF/OVMF_CODE.fd,loader.readonly=yes,loader.type=pflash \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot
