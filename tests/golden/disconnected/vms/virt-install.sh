#!/bin/sh
# The control-plane VMs of dgxpod.nvidia.com as virt-install commands (written by upi).
# Each VM network-boots its per-MAC PXE file, installs RHCOS and powers off;
# start it again with `virsh start NAME` (or let `upi boot-vms --watch` do it).
# No `--boot network,...`: with `--pxe` alone virt-install network-boots only the
# install phase and the defined domain boots from disk, so a restart cannot re-PXE.
set -eu

virt-install --connect qemu:///system --name bootstrap \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/dgxpod-bootstrap.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:21:03:53,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name master-0 \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/dgxpod-master-0.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:21:03:50,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name master-1 \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/dgxpod-master-1.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:21:03:51,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name master-2 \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/dgxpod-master-2.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:21:03:52,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot
