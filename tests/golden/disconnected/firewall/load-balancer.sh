#!/bin/sh
# Firewall and SELinux for the load balancer 10.33.3.54 of dgxpod.nvidia.com (written by upi).
# Run once as root on 10.33.3.54, before `upi push` starts HAProxy with haproxy/haproxy.cfg
# (docs/render.md, "Firewall and SELinux").
# The provisioner is 10.33.3.18: run firewall/provisioner.sh there.
set -eu

# firewalld: in the default zone.
if firewall-cmd --state >/dev/null 2>&1; then
    # HAProxy frontend api-server
    firewall-cmd --permanent --add-port 6443/tcp
    # HAProxy frontend machine-config-server
    firewall-cmd --permanent --add-port 22623/tcp
    # HAProxy frontend ingress-router-https
    firewall-cmd --permanent --add-port 443/tcp
    # HAProxy frontend ingress-router-http
    firewall-cmd --permanent --add-port 80/tcp
    firewall-cmd --reload
else
    echo "firewalld is not running: open these yourself: 6443/tcp 22623/tcp 443/tcp 80/tcp" >&2
fi

# SELinux: HAProxy (haproxy_t) may bind and connect only to http ports unless this is on;
# 6443 and 22623 are not http ports.
if command -v selinuxenabled >/dev/null 2>&1 && selinuxenabled; then
    setsebool -P haproxy_connect_any on
fi
