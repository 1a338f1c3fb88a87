#!/usr/bin/env bash
# Several hosts on one Linux machine: a server host and client hosts, each in
# its own network namespace (own stack, own address), joined by veth pairs
# to a bridge in the server's namespace. Needs root (CAP_NET_ADMIN) and
# iproute2. Source it, then:
#
#   netns_up PREFIX N        server 10.91.0.1, clients 10.91.0.11 .. 10.91.0.(10+N)
#   on PREFIX NODE CMD...    run CMD on host NODE (s, c1, c2, ...)
#   netns_rate PREFIX I RATE shape client I's link both ways (tc tbf, e.g. 160mbit)
#   netns_link PREFIX I up|down   plug or unplug client I's cable
#   netns_down PREFIX        remove every namespace made by netns_up
#
# netns_can tells whether this machine allows it (and says why not).

netns_can() {
  if [ "$(id -u)" != 0 ]; then echo "not root"; return 1; fi
  if ! command -v ip > /dev/null; then echo "no iproute2"; return 1; fi
  local probe="fcprobe$$"
  if ! ip netns add "$probe" 2> /dev/null; then
    echo "ip netns add is not permitted here"; return 1
  fi
  ip netns del "$probe"
  return 0
}

netns_up() {
  local p=$1 n=$2 i
  ip netns add "${p}s" || return 1
  ip -n "${p}s" link set lo up
  ip -n "${p}s" link add br0 type bridge
  ip -n "${p}s" addr add 10.91.0.1/24 dev br0
  ip -n "${p}s" link set br0 up
  for i in $(seq 1 "$n"); do
    ip netns add "${p}c$i" || return 1
    ip -n "${p}c$i" link set lo up
    ip link add "${p}v$i" type veth peer name "${p}p$i" || return 1
    ip link set "${p}v$i" netns "${p}c$i"
    ip link set "${p}p$i" netns "${p}s"
    ip -n "${p}c$i" link set "${p}v$i" name eth0
    ip -n "${p}c$i" addr add "10.91.0.$((10 + i))/24" dev eth0
    ip -n "${p}c$i" link set eth0 up
    ip -n "${p}s" link set "${p}p$i" master br0
    ip -n "${p}s" link set "${p}p$i" up
  done
}

on() {
  local p=$1 node=$2
  shift 2
  ip netns exec "${p}${node}" "$@"
}

netns_rate() {
  local p=$1 i=$2 rate=$3
  # Upload: the client's egress; download: the bridge port's egress.
  ip -n "${p}c$i" link set eth0 txqueuelen 1000 2> /dev/null
  tc -n "${p}c$i" qdisc replace dev eth0 root tbf rate "$rate" burst 64kb latency 500ms
  tc -n "${p}s" qdisc replace dev "${p}p$i" root tbf rate "$rate" burst 64kb latency 500ms
}

netns_link() {
  local p=$1 i=$2 state=$3
  ip -n "${p}c$i" link set eth0 "$state"
}

netns_down() {
  local p=$1 ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^${p}[sc]"); do
    ip netns del "$ns"
  done
}
