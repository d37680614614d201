#!/usr/bin/env bash
# Checks the host tools that the tests and `make demo` exec. Prints one line
# per missing tool with the Debian package that provides it and exits 1.
#
# Usage: tools/prereqs.sh [--install]
#
# --install: when run as root on a machine with apt-get, first installs the
# Debian packages of the missing tools (CI's clean machines); elsewhere it
# only checks. Go itself is never installed: Debian's is older than go.mod's.
#
# Only bash builtins are used here, so a test can run the script with a PATH
# restricted to a few tools.
set -euo pipefail

readonly GO_MIN_MINOR=26 # go.mod: go 1.26

# tool:Debian package. git-http-backend is looked up in `git --exec-path`.
readonly TOOLS=(
	go:golang
	make:make
	gcc:gcc
	git:git
	git-http-backend:git
	gpg:gnupg
	gpgconf:gnupg
	ssh:openssh-client
	ssh-keygen:openssh-client
	diff:diffutils
	flock:util-linux
	sha256sum:coreutils
	chromium:chromium
	chromedriver:chromium-driver
)

install=false
case "${1:-}" in
--install) install=true ;;
"") ;;
*)
	echo "usage: tools/prereqs.sh [--install]" >&2
	exit 2
	;;
esac

# found TOOL succeeds when TOOL is usable.
found() {
	case "$1" in
	git-http-backend)
		local dir
		command -v git >/dev/null && dir="$(git --exec-path 2>/dev/null)" && [[ -x $dir/git-http-backend ]]
		;;
	go)
		# Reject an older Go with its own message: a bare "missing" would mislead.
		command -v go >/dev/null || return 1
		local v
		v="$(go env GOVERSION 2>/dev/null)" || return 1
		[[ $v =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= GO_MIN_MINOR)) && return 0
		too_old_go="$v"
		return 1
		;;
	*) command -v "$1" >/dev/null ;;
	esac
}

# check sets absent to the "tool:package" entries that are not usable.
check() {
	local entry
	absent=()
	too_old_go=""
	for entry in "${TOOLS[@]}"; do
		found "${entry%%:*}" || absent+=("$entry")
	done
}

check

if $install && ((${#absent[@]} > 0)) && ((EUID == 0)) && command -v apt-get >/dev/null; then
	declare -A pkgs=()
	for entry in "${absent[@]}"; do
		[[ ${entry%%:*} == go ]] || pkgs[${entry#*:}]=1
	done
	if ((${#pkgs[@]} > 0)); then
		echo "tools/prereqs.sh: installing ${!pkgs[*]}" >&2
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${!pkgs[@]}"
		check
	fi
fi

((${#absent[@]} == 0)) && exit 0
for entry in "${absent[@]}"; do
	tool="${entry%%:*}" pkg="${entry#*:}"
	case "$tool" in
	go)
		if [[ -n $too_old_go ]]; then
			echo "tools/prereqs.sh: go is $too_old_go, need go1.$GO_MIN_MINOR or later (https://go.dev/dl)" >&2
		else
			echo "tools/prereqs.sh: missing go (go1.$GO_MIN_MINOR or later from https://go.dev/dl; Debian's $pkg is older)" >&2
		fi
		;;
	git-http-backend) echo "tools/prereqs.sh: missing git http-backend in \`git --exec-path\` (Debian package $pkg)" >&2 ;;
	*) echo "tools/prereqs.sh: missing $tool (Debian package $pkg)" >&2 ;;
	esac
done
echo "tools/prereqs.sh: see the prerequisites in README.md; as root on Debian, tools/prereqs.sh --install installs them" >&2
exit 1
