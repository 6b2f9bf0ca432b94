#!/usr/bin/env bash
# netns.sh — a second host on this machine for the tests: a network namespace
# joined to this one by a veth pair, so that a server in it is really remote
# (TCP over a link that can be cut) while all traffic stays on this machine.
#
#   netns.sh up KEY [OWNER_PID]   make namespace ckns-KEY and the pair ckh-KEY (here) /
#                                 ckn-KEY (there); print "HOST_IP NS_IP". KEY is a
#                                 number below 32768 (a test passes its PID): it picks
#                                 a private /30 in 10.200.0.0/15. With OWNER_PID, a
#                                 watchdog removes both once that process is gone.
#   netns.sh down KEY             remove them (the namespace's processes must be gone)
#   netns.sh cut KEY | heal KEY   take the link down / up (a partition: packets vanish,
#                                 no reset, as when a switch or a cable fails)
#   netns.sh up2 KEY              a second pair into the namespace made by `up`:
#                                 ckh2-KEY (here) / ckm-KEY (there), on its own /30 in
#                                 10.202.0.0/15; print "HOST_IP2 NS_IP2". Traffic to
#                                 HOST_IP2 takes this pair alone, so a server listening
#                                 there (ganesha) can be cut off while PostgreSQL, on
#                                 the first pair, stays reachable. It goes with the
#                                 namespace (down, or the watchdog).
#   netns.sh cut2 KEY | heal2 KEY the same for the second pair's link
#   netns.sh exec KEY CMD...      run CMD in the namespace
# Needs root (ip netns, from iproute2).
set -euo pipefail

cmd=${1:-} key=${2:-}
[ -n "$cmd" ] && [[ "$key" =~ ^[0-9]+$ ]] && [ "$key" -lt 32768 ] ||
	{ echo "usage: netns.sh up|up2|down|cut|heal|cut2|heal2|exec KEY (a number below 32768) ..." >&2; exit 2; }
ns=ckns-$key here=ckh-$key there=ckn-$key
net="10.$((200 + (key >> 14))).$(((key >> 6) & 255))"
last=$(((key & 63) * 4))
host_ip=$net.$((last + 1)) ns_ip=$net.$((last + 2))
here2=ckh2-$key there2=ckm-$key
net2="10.$((202 + (key >> 14))).$(((key >> 6) & 255))"
host_ip2=$net2.$((last + 1)) ns_ip2=$net2.$((last + 2))

# pair HERE THERE HOST_IP NS_IP: a veth pair from here into the namespace, up
pair() {
	ip link add "$1" type veth peer name "$2"
	ip link set "$2" netns "$ns"
	ip addr add "$3/30" dev "$1"
	ip link set "$1" up
	ip netns exec "$ns" ip addr add "$4/30" dev "$2"
	ip netns exec "$ns" ip link set "$2" up
}

case "$cmd" in
up)
	ip netns add "$ns"
	pair "$here" "$there" "$host_ip" "$ns_ip"
	ip netns exec "$ns" ip link set lo up
	if [ -n "${3:-}" ]; then
		owner=$3
		( trap '' HUP INT TERM
		  while kill -0 "$owner" 2>/dev/null && ip netns list | grep -qw "$ns"; do sleep 0.5; done
		  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		  ip link del "$here" 2>/dev/null || true
		  ip netns del "$ns" 2>/dev/null || true ) </dev/null >/dev/null 2>&1 &
		disown
	fi
	echo "$host_ip $ns_ip"
	;;
up2)
	ip netns list | grep -qw "$ns" || { echo "netns.sh up2: no namespace $ns (up first)" >&2; exit 1; }
	pair "$here2" "$there2" "$host_ip2" "$ns_ip2"
	echo "$host_ip2 $ns_ip2"
	;;
down)
	ip link del "$here2" 2>/dev/null || true
	ip link del "$here" 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	;;
cut) ip netns exec "$ns" ip link set "$there" down ;; # packets vanish here: no route elsewhere
heal) ip netns exec "$ns" ip link set "$there" up ;;
cut2) ip netns exec "$ns" ip link set "$there2" down ;;
heal2) ip netns exec "$ns" ip link set "$there2" up ;;
exec)
	shift 2
	exec ip netns exec "$ns" "$@"
	;;
*) echo "netns.sh: unknown command $cmd" >&2; exit 2 ;;
esac
