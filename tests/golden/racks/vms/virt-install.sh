#!/bin/sh
# The control-plane VMs of pod.dgx.example.com as virt-install commands (written by upi).
# Each VM network-boots its per-MAC PXE file, installs RHCOS and powers off;
# start it again with `virsh start NAME` (or let `upi boot-vms --watch` do it).
# No `--boot network,...`: with `--pxe` alone virt-install network-boots only the
# install phase and the defined domain boots from disk, so a restart cannot re-PXE.
set -eu

virt-install --connect qemu:///system --name bootstrap \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/pod-bootstrap.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:40:00:20,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name master-0 \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/pod-master-0.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:40:00:21,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name master-1 \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/pod-master-1.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:40:00:22,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot

virt-install --connect qemu:///system --name master-2 \
  --memory 16384 --vcpus 4 --os-variant rhel9.0 \
  --disk path=/var/lib/libvirt/images/pod-master-2.qcow2,size=100,format=qcow2,bus=virtio,sparse=yes \
  --network bridge=br0,mac=52:54:00:40:00:23,model=virtio \
  --pxe --graphics vnc,listen=127.0.0.1 --noautoconsole --noreboot
