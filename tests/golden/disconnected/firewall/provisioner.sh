#!/bin/sh
# Firewall and SELinux for the provisioner 10.33.3.18 of dgxpod.nvidia.com (written by upi).
# Run once as root on 10.33.3.18, before `upi push` and before any node PXE boots;
# again after changing provisioner.* or http_base_url (docs/render.md, "Firewall and SELinux").
# The load balancer is 10.33.3.54: run firewall/load-balancer.sh there.
set -eu

# firewalld: in the zone of eno1 (the default zone when it has none).
if firewall-cmd --state >/dev/null 2>&1; then
    iface=eno1
    zone=$(firewall-cmd --get-zone-of-interface="$iface" 2>/dev/null || firewall-cmd --get-default-zone)
    # dnsmasq answers the names of the cluster (53/udp, 53/tcp)
    firewall-cmd --permanent --zone="$zone" --add-service dns
    # dnsmasq leases the nodes their addresses (67/udp)
    firewall-cmd --permanent --zone="$zone" --add-service dhcp
    # pxelinux and GRUB fetch boot files, kernel and initramfs (69/udp; the service loads the TFTP connection helper of firewalld)
    firewall-cmd --permanent --zone="$zone" --add-service tftp
    # nodes fetch ignition and the RHCOS rootfs from http://10.33.3.18:8080
    firewall-cmd --permanent --zone="$zone" --add-port 8080/tcp
    firewall-cmd --reload
else
    echo "firewalld is not running: open these yourself: dns dhcp tftp 8080/tcp" >&2
fi

# SELinux: labels for what dnsmasq and the web server read, and the web server's port.
if command -v selinuxenabled >/dev/null 2>&1 && selinuxenabled; then
    tftp_root=/var/lib/tftpboot
    http_root=/var/www/html
    dnsmasq_dir=/etc/dnsmasq.d
    # dnsmasq (dnsmasq_t) serves TFTP only from tftpdir_t.
    semanage fcontext -a -t tftpdir_t "$tftp_root(/.*)?" 2>/dev/null \
        || semanage fcontext -m -t tftpdir_t "$tftp_root(/.*)?"
    # httpd/nginx (httpd_t) serve only httpd_sys_content_t: ignition and RHCOS files.
    semanage fcontext -a -t httpd_sys_content_t "$http_root(/.*)?" 2>/dev/null \
        || semanage fcontext -m -t httpd_sys_content_t "$http_root(/.*)?"
    mkdir -p "$tftp_root" "$http_root"
    restorecon -R "$tftp_root" "$http_root" "$dnsmasq_dir"
    # The web server may bind its port only when it is an http_port_t port (80 and 443 are).
    port=8080
    if [ "$port" != 80 ] && [ "$port" != 443 ]; then
        semanage port -a -t http_port_t -p tcp "$port" 2>/dev/null \
            || semanage port -m -t http_port_t -p tcp "$port"
    fi
fi
