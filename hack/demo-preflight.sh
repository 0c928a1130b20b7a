#!/usr/bin/env bash
# make demo's first step, before any tool is built: can this machine run the
# local control plane? It is Linux's: its pods are chrooted (root, or an
# unprivileged user namespace in which to chroot) and, as root, get network
# namespaces of their own. Answers within a second, and says what to do
# instead: the demo's container image (make demo-container), which runs
# anywhere Docker or Podman does. `machine-api-provider demo` checks the same
# again, ports included (pkg/localcluster/preflight.go).
#
# Exit 0: go on. Exit 2: not Linux, but Docker or Podman is here: make demo
# runs the container (make demo-container). Exit 1: it cannot run here; the
# reason, and what to do instead, is on stderr.
set -u

# A container engine that answers (a docker client without its daemon, or
# Docker Desktop not started, would fail only after the image is built).
engine="" idle=""
for e in docker podman; do
	if command -v "$e" >/dev/null 2>&1; then
		if "$e" info >/dev/null 2>&1; then engine=$e; break; fi
		[[ -z "$idle" ]] && idle=$e
	fi
done
instead() {
	if [[ -n "$engine" ]]; then
		echo "  Run it in a container instead ($engine is here): make demo-container" >&2
	elif [[ -n "$idle" ]]; then
		echo "  Run it in a container instead: start $idle's daemon ($idle info fails), then make demo-container" >&2
	else
		echo "  Run it in a container instead: install Docker or Podman, then make demo-container" >&2
	fi
	echo "  (README.md, \"make demo on any machine\")." >&2
}

os=$(uname -s)
if [[ "$os" != Linux ]]; then
	echo "make demo: the local control plane runs on Linux only (its pods are chrooted, in network namespaces of their own); this is $os." >&2
	if [[ -n "$engine" ]]; then
		echo "  Running it in a container with $engine instead (make demo-container): the first run builds its tools for Linux (minutes)." >&2
		exit 2
	fi
	instead
	exit 1
fi

# root: chroot and network namespaces, every pod's ports its own.
if [[ "$(id -u)" == 0 ]]; then
	exit 0
fi

# Another user: the pods are chrooted in a user namespace of their own, as
# the pod runner starts them (pkg/localcluster/pod_container.go).
if ! command -v unshare >/dev/null 2>&1; then
	exit 0 # util-linux's unshare is missing: nothing to try; the demo checks again
fi
if err=$(unshare --user --map-root-user chroot / true 2>&1); then
	exit 0
fi
echo "make demo: the local control plane runs its pods chrooted, which takes root or an unprivileged user namespace," >&2
echo "  and this user cannot have one here (unshare --user --map-root-user chroot / true: ${err:-failed})." >&2
read_sysctl() { cat "/proc/sys/$1" 2>/dev/null; }
if [[ "$(read_sysctl kernel/apparmor_restrict_unprivileged_userns)" == 1 ]]; then
	echo "  AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 24.04's default)." >&2
	echo "  Allow them until the next boot: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" >&2
elif [[ "$(read_sysctl kernel/unprivileged_userns_clone)" == 0 ]]; then
	echo "  They are off: sudo sysctl -w kernel.unprivileged_userns_clone=1" >&2
elif [[ "$(read_sysctl user/max_user_namespaces)" == 0 ]]; then
	echo "  They are off: sudo sysctl -w user.max_user_namespaces=15000" >&2
fi
echo "  Or run make demo as root." >&2
instead
exit 1
