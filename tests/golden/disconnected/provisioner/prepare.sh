#!/bin/bash
# Prepare the provisioner 10.33.3.18 of dgxpod.nvidia.com on RHEL 9 (written by upi; docs/prepare.md).
# Run once as root on 10.33.3.18, after `upi render` and before the first `upi push`; then run
# firewall/provisioner.sh. Idempotent: each step looks first and changes only what differs, so a
# second run changes nothing.
#
# It installs the packages, points the web server (httpd) at the HTTP root on the port of
# http_base_url, labels that port for SELinux, enables the services and, last, moves this
# host's address onto the VMs' bridge (the one step that may stall an SSH session).
# Not here: HAProxy runs on the load balancer 10.33.3.54: install and enable haproxy there (dnf install -y haproxy; systemctl enable --now haproxy) and run firewall/load-balancer.sh there.
#
# PREPARE_ROOT: write the web server's files under another root (a scratch directory to
# preview them); the commands still act on this host.
set -euo pipefail

root=${PREPARE_ROOT:-}
if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
    echo "prepare.sh: run as root (it installs packages and changes the network)" >&2
    exit 1
fi
for tool in dnf rpm systemctl nmcli; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "prepare.sh: $tool not found: this script is for RHEL 9 (dnf, systemd, NetworkManager)" >&2
        exit 1
    fi
done
say() { echo "prepare.sh: $*"; }

# 1. Packages: only the missing ones are installed.
missing=()
for pkg in dnsmasq httpd policycoreutils-python-utils firewalld libvirt qemu-kvm virt-install; do
    rpm -q --quiet "$pkg" || missing+=("$pkg")
done
if [ -n "${missing[*]:-}" ]; then
    say "installing ${missing[*]}"
    dnf install -y "${missing[@]}"
fi

# 2. SELinux: httpd (httpd_t) may bind only http_port_t ports. -a for a port no type has,
#    -m for one the policy gives another type (8080 is http_cache_port_t).
port=8080
if command -v selinuxenabled >/dev/null 2>&1 && selinuxenabled; then
    tcp_ports() {  # the tcp ports and ranges of SELinux type $1 (of every type: ""), one a line
        semanage port -l | awk -v t="$1" '$2 == "tcp" && (t == "" || $1 == t) {
            for (i = 3; i <= NF; i++) { sub(",", "", $i); print $i } }'
    }
    in_list() {  # is port $1 one of the ports or ranges (low-high) on stdin?
        awk -v p="$1" -F- '{ hi = (NF > 1) ? $2 : $1 } p + 0 >= $1 + 0 && p + 0 <= hi + 0 { found = 1 }
            END { exit !found }'
    }
    if tcp_ports http_port_t | in_list "$port"; then
        :  # already an http port (80, 443, 8443, ...)
    elif tcp_ports "" | in_list "$port"; then
        say "SELinux: tcp/$port becomes http_port_t (the policy gives it another type)"
        semanage port -m -t http_port_t -p tcp "$port"
    else
        say "SELinux: tcp/$port becomes http_port_t"
        semanage port -a -t http_port_t -p tcp "$port"
    fi
fi

# 3. The web server: a drop-in of upi's own holds the one Listen (the port of http_base_url) and
#    the document root (provisioner.http_root); httpd.conf's own Listen lines are commented out,
#    so httpd takes no other port (HAProxy needs 80 and 443 where it runs on this host).
http_root=/var/www/html
# http_base_url's path, if it has one: the same files are served below it too (an Alias).
http_path=''
alias=""
[ -z "$http_path" ] || alias="    Alias \"$http_path\" \"$http_root\""
drop_in="$root"/etc/httpd/conf.d/upi.conf
main_conf="$root"/etc/httpd/conf/httpd.conf
httpd_changed=0
want=$(cat <<EOF
# The HTTP root of dgxpod.nvidia.com: ignition and RHCOS files (written by upi's provisioner/prepare.sh).
# The one Listen of httpd: prepare.sh commented out those of httpd.conf.
Listen $port
<VirtualHost *:$port>
    DocumentRoot "$http_root"
$alias
</VirtualHost>
<Directory "$http_root">
    Options None
    AllowOverride None
    Require all granted
</Directory>
EOF
)
if [ ! -f "$drop_in" ] || [ "$(cat "$drop_in")" != "$want" ]; then
    say "writing $drop_in"
    mkdir -p "$(dirname "$drop_in")"
    printf '%s\n' "$want" > "$drop_in.upi-new"
    chmod 0644 "$drop_in.upi-new"
    mv -f "$drop_in.upi-new" "$drop_in"
    httpd_changed=1
fi
if [ -f "$main_conf" ] && grep -Eq '^[[:space:]]*Listen[[:space:]]' "$main_conf"; then
    say "commenting out the Listen lines of $main_conf (the drop-in has the one Listen)"
    sed -i -E 's/^([[:space:]]*Listen[[:space:]].*)$/#\1  # upi: see conf.d\/upi.conf/' "$main_conf"
    httpd_changed=1
fi
for dir in "$http_root" /var/lib/tftpboot; do
    if [ ! -d "$root$dir" ]; then
        say "creating $root$dir"
        mkdir -p "$root$dir"
    fi
done

# 4. Services: enabled (and started) unless they already are.
enable_unit() {  # unit, "now" or "", why
    if systemctl is-enabled --quiet "$1" && { [ "$2" != now ] || systemctl is-active --quiet "$1"; }; then
        return 0
    fi
    say "enabling $1 ($3)"
    if [ "$2" = now ]; then systemctl enable --now "$1"; else systemctl enable "$1"; fi
}
enable_unit firewalld.service now 'firewall/provisioner.sh opens DNS, DHCP, TFTP and the HTTP port in it'
enable_unit httpd.service now 'serves /var/www/html at http://10.33.3.18:8080'
enable_unit dnsmasq.service '' 'started by upi push with the rendered dnsmasq/ configuration'
enable_unit virtqemud.socket now 'the QEMU driver of libvirt, for boot-vms'
enable_unit virtstoraged.socket now 'the storage driver of libvirt, for the VM disks'
if [ "$httpd_changed" = 1 ] && systemctl is-active --quiet httpd.service; then
    say "restarting httpd (its configuration changed)"
    systemctl restart httpd.service
fi

# 5. The VMs' bridge br0 takes over this host's NIC and its address: NetworkManager moves
#    the address in one activation (nmcli connection up), so connections to 10.33.3.18 pause
#    for a few seconds but the address stays. Run this from a console, tmux or screen if unsure; a
#    lost SSH session does not stop it (HUP is ignored from here on).
bridge=br0
port_nic=eno1
# dnsmasq serves provisioner.interface (eno1, dnsmasq/dhcp-pxe.conf interface=): once it is a
# port of br0, DHCP and DNS arrive on br0 and dnsmasq no longer sees them. Set
# provisioner.interface: br0 in the inventory, then render and push again (docs/prepare.md).
dnsmasq_warning="dnsmasq serves $port_nic (provisioner.interface), now a port of $bridge: set provisioner.interface: $bridge in the inventory, then upi render and upi push (docs/prepare.md)"
address=10.33.3.18/24
gateway=10.33.3.1
dns=10.33.0.10
ipv4=(ipv4.method manual ipv4.addresses "$address" ipv4.gateway "$gateway" ipv4.dns "$dns")
want=$(printf '%s\n' manual "$address" "$gateway" "$dns")
trap '' HUP
activate=0
if ! nmcli -g connection.type connection show "$bridge" >/dev/null 2>&1 \
        && nmcli -g GENERAL.TYPE device show "$bridge" >/dev/null 2>&1; then
    # A bridge NetworkManager has no profile for (libvirt's virbr0, a manual one): not taken over.
    say "$bridge exists and is not a NetworkManager profile: left alone; give it its port NIC yourself"
else
    if ! have=$(nmcli -g ipv4.method,ipv4.addresses,ipv4.gateway,ipv4.dns connection show "$bridge" 2>/dev/null); then
        say "creating bridge $bridge with $address"
        # STP off: its listening delay would outlast a PXE client's DHCP retries.
        nmcli connection add type bridge con-name "$bridge" ifname "$bridge" bridge.stp no \
            connection.autoconnect-slaves 1 "${ipv4[@]}"
        activate=1
    elif [ "$have" != "$want" ]; then
        say "setting $bridge to $address"
        nmcli connection modify "$bridge" "${ipv4[@]}"
        activate=1
    fi
    if [ -n "$port_nic" ]; then
        port_profile="$bridge-port-$port_nic"
        if ! nmcli -g connection.type connection show "$port_profile" >/dev/null 2>&1; then
            say "making $port_nic a port of $bridge"
            nmcli connection add type ethernet slave-type bridge con-name "$port_profile" \
                ifname "$port_nic" master "$bridge"
        fi
        current=$(nmcli -g GENERAL.CONNECTION device show "$port_nic" 2>/dev/null || true)
        if [ "$current" != "$port_profile" ]; then
            if [ -n "$current" ]; then
                # Else it would take $port_nic back at the next boot.
                say "profile '$current' no longer starts on $port_nic at boot"
                nmcli connection modify "$current" connection.autoconnect no
            fi
            activate=1
        fi
    fi
    if [ "$activate" = 1 ]; then
        say "activating $bridge: $address moves to $bridge"
        nmcli connection up "$bridge"
    fi
    if [ -n "$dnsmasq_warning" ]; then
        echo "prepare.sh: warning: $dnsmasq_warning" >&2
    fi
fi

say "done; next: firewall/provisioner.sh, then upi push"
