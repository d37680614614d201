#!/usr/bin/env bash
# Builds the pinned test binaries (Kubernetes control plane, etcd, kwok, Volcano,
# sops, kustomize, an OCI registry, Gitea)
# into BIN_DIR from the Go module proxy.
#
# Usage: tools/build.sh BIN_DIR [GROUP...]
#
# Each tool group is its own Go module under tools/<group> (their dependency graphs
# conflict). A group's build is keyed by its go.mod, go.sum, the Go version, the
# target platform and this script's recipe, and cached outside the checkout in
#   ${FLOTILLA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/tools}/<group>-<key>/
# so a fresh clone does not rebuild. BIN_DIR/.stamp-<group> records the key that
# was installed, which makes a warm run a few file checks.
set -euo pipefail

# Bump when something outside the per-group build_* functions changes the outputs.
readonly RECIPE_VERSION=1
# The groups `tools/build.sh BIN` builds: what the tests run. staticcheck
# (for `make lint`) and flux (the peer of BenchmarkPeerFlux, `make
# bench-flux`) are built only when named.
readonly ALL_GROUPS=(etcd kube gitea kustomize kwok registry sops volcano)

TOOLS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly TOOLS_DIR

die() {
	echo "tools/build.sh: $*" >&2
	exit 1
}

[[ $# -ge 1 ]] || die "usage: tools/build.sh BIN_DIR [GROUP...]"
mkdir -p "$1"
BIN_DIR="$(cd "$1" && pwd)"
shift
GROUPS_TO_BUILD=("$@")
[[ ${#GROUPS_TO_BUILD[@]} -gt 0 ]] || GROUPS_TO_BUILD=("${ALL_GROUPS[@]}")

CACHE_ROOT="${FLOTILLA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/tools}"

command -v go >/dev/null || die "go is not on PATH"
# Pin the build environment explicitly so a developer's settings cannot change
# what ends up in the cache under the same key.
export GOTOOLCHAIN=local
export GOFLAGS=-buildvcs=false
export GOWORK=off
export CGO_ENABLED=0
# Build for the host (a GOOS/GOARCH set for cross-compiling must not leak in), in
# one `go env` call because a warm run should do almost nothing.
{ read -r GOOS; read -r GOARCH; read -r GOVERSION; } < <(go env GOHOSTOS GOHOSTARCH GOVERSION)
[[ -n $GOVERSION ]] || die "go env printed no GOVERSION"
export GOOS GOARCH

# outputs_<group> lists what a group installs into BIN_DIR (files or directories).
outputs_etcd() { echo etcd; }
outputs_kube() { echo kube-apiserver kube-controller-manager kube-scheduler; }
outputs_kwok() { echo kwok kwok-stages; }
outputs_volcano() { echo vc-scheduler vc-controller-manager volcano; }
outputs_staticcheck() { echo staticcheck; }
outputs_sops() { echo sops; }
outputs_kustomize() { echo kustomize; }
outputs_registry() { echo registry; }
outputs_flux() { echo source-controller kustomize-controller flux; }
outputs_gitea() { echo gitea gitea-data; }

# module_version MODDIR MODULE prints the version of MODULE that MODDIR's go.mod selects.
module_version() {
	go -C "$1" list -m -f '{{.Version}}' "$2"
}

# module_dir MODDIR MODULE downloads MODULE at the version MODDIR's go.mod selects
# and prints its directory in the module cache.
module_dir() {
	local version dir
	version="$(module_version "$1" "$2")"
	dir="$(go -C "$1" mod download -json "$2@$version" | sed -n 's/^\t"Dir": "\(.*\)",\{0,1\}$/\1/p')"
	[[ -n $dir && -d $dir ]] || die "cannot locate the source of $2@$version in the module cache"
	echo "$dir"
}

# go_build MODDIR OUT LDFLAGS PACKAGE builds one binary with the flags every group shares.
go_build() {
	go -C "$1" build -p 2 -trimpath -ldflags "-s -w $3" -o "$2" "$4"
}

# expect_output DESCRIPTION PATTERN COMMAND... fails the build unless COMMAND's
# output matches PATTERN, so a broken binary never reaches the cache.
expect_output() {
	local what="$1" pattern="$2" out
	shift 2
	out="$("$@" 2>&1)" || die "$what: '$*' failed: $out"
	grep -Eq "$pattern" <<<"$out" || die "$what: '$*' printed '$out', want /$pattern/"
}

# build_<group> MODDIR OUT builds a group's outputs into the empty directory OUT.

build_etcd() {
	local version
	version="$(module_version "$1" go.etcd.io/etcd/server/v3)"
	go_build "$1" "$2/etcd" "" go.etcd.io/etcd/server/v3
	expect_output etcd "etcd Version: ${version#v}" "$2/etcd" --version
}

build_kube() {
	local version major minor flags="" pkg v
	version="$(module_version "$1" k8s.io/kubernetes)"
	major="${version#v}"
	major="${major%%.*}"
	minor="${version#v*.}"
	minor="${minor%%.*}"
	# What k8s.io/kubernetes/hack/lib/version.sh sets, so /version reports the
	# pinned release instead of v0.0.0-master.
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		for v in "gitVersion=$version" "gitMajor=$major" "gitMinor=$minor" gitTreeState=clean; do
			flags+=" -X $pkg.$v"
		done
	done
	go -C "$1" build -p 2 -trimpath -ldflags "-s -w$flags" -o "$2/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler
	for v in kube-apiserver kube-controller-manager kube-scheduler; do
		expect_output "$v" "^Kubernetes $version\$" "$2/$v" --version
	done
}

build_kwok() {
	local version src stage f
	version="$(module_version "$1" sigs.k8s.io/kwok)"
	go_build "$1" "$2/kwok" "-X sigs.k8s.io/kwok/pkg/consts.Version=$version" sigs.k8s.io/kwok/cmd/kwok
	expect_output kwok "$version" "$2/kwok" --version
	# The stages that make fake nodes Ready (and keep them so) and pods Running.
	src="$(module_dir "$1" sigs.k8s.io/kwok)"
	mkdir -p "$2/kwok-stages"
	for stage in node/fast node/heartbeat pod/fast; do
		for f in "$src/kustomize/stage/$stage"/*.yaml; do
			[[ $(basename "$f") == kustomization.yaml ]] && continue
			[[ ! -e "$2/kwok-stages/$(basename "$f")" ]] || die "kwok: two stages named $(basename "$f")"
			cp "$f" "$2/kwok-stages/"
		done
	done
	chmod -R u+w "$2/kwok-stages"
}

build_registry() {
	local version
	version="$(module_version "$1" github.com/distribution/distribution/v3)"
	go_build "$1" "$2/registry" "-X github.com/distribution/distribution/v3/version.version=$version" \
		github.com/distribution/distribution/v3/cmd/registry
	expect_output registry "$version" "$2/registry" --version
}

build_flux() {
	local m src
	for m in source-controller kustomize-controller; do
		go_build "$1" "$2/$m" "" "github.com/fluxcd/$m"
		# No --version flag; its usage names the flags the benchmark passes.
		expect_output "$m" "metrics-addr" "$2/$m" --help
	done
	# The CRDs both controllers serve and watch, from the pinned modules.
	mkdir -p "$2/flux/crds"
	for m in source-controller kustomize-controller; do
		src="$(module_dir "$1" "github.com/fluxcd/$m")"
		cp "$src"/config/crd/bases/*.yaml "$2/flux/crds/"
	done
	chmod -R u+w "$2/flux"
}

build_gitea() {
	local version src work
	version="$(module_version "$1" code.gitea.io/gitea)"
	src="$(module_dir "$1" code.gitea.io/gitea)"
	# Its go.mod has replace directives, which a requiring module ignores:
	# build inside a copy of the module, with its own go.mod and go.sum.
	work="$(mktemp -d)"
	cp -R "$src/." "$work/"
	chmod -R u+w "$work"
	# SQLite (the tests' database) needs cgo.
	CGO_ENABLED=1 go -C "$work" build -p 2 -trimpath -tags 'sqlite sqlite_unlock_notify' \
		-ldflags "-s -w -X main.Version=${version#v}" -o "$2/gitea" .
	expect_output gitea "version ${version#v}" "$2/gitea" --version
	# Without bindata it reads its templates, locales and options at run
	# time (STATIC_ROOT_PATH); the web assets are not built (the tests use
	# the API and Git only).
	mkdir -p "$2/gitea-data"
	cp -R "$work/templates" "$work/options" "$work/public" "$2/gitea-data/"
	chmod -R u+w "$2/gitea-data"
	rm -rf "$work"
}

build_sops() {
	local version
	version="$(module_version "$1" github.com/getsops/sops/v3)"
	go_build "$1" "$2/sops" "" github.com/getsops/sops/v3/cmd/sops
	# No version check: it would ask GitHub for the latest release.
	expect_output sops "^sops ${version#v}" "$2/sops" --version --disable-version-check
}

build_kustomize() {
	local version
	version="$(module_version "$1" sigs.k8s.io/kustomize/kustomize/v5)"
	go_build "$1" "$2/kustomize" "" sigs.k8s.io/kustomize/kustomize/v5
	expect_output kustomize "^$version\$" "$2/kustomize" version
}

build_staticcheck() {
	local version
	version="$(module_version "$1" honnef.co/go/tools)"
	go_build "$1" "$2/staticcheck" "" honnef.co/go/tools/cmd/staticcheck
	expect_output staticcheck "${version#v}" "$2/staticcheck" -version
}

build_volcano() {
	local version src flags
	version="$(module_version "$1" volcano.sh/volcano)"
	flags="-X volcano.sh/volcano/pkg/version.Version=$version"
	go_build "$1" "$2/vc-scheduler" "$flags" volcano.sh/volcano/cmd/scheduler
	go_build "$1" "$2/vc-controller-manager" "$flags" volcano.sh/volcano/cmd/controller-manager
	expect_output vc-scheduler "Version: $version" "$2/vc-scheduler" --version
	expect_output vc-controller-manager "Version: $version" "$2/vc-controller-manager" --version
	# The controller manager waits for both the volcano and the jobflow CRDs.
	src="$(module_dir "$1" volcano.sh/volcano)"
	mkdir -p "$2/volcano/crds"
	cp "$src"/config/crd/volcano/bases/*.yaml "$src"/config/crd/jobflow/bases/*.yaml "$2/volcano/crds/"
	# Volcano's default scheduler configuration, as its installer ships it.
	cp "$src/installer/helm/chart/volcano/config/volcano-scheduler.conf" "$2/volcano/scheduler.conf"
	chmod -R u+w "$2/volcano"
}

group_key() {
	local moddir="$TOOLS_DIR/$1"
	{
		echo "recipe $RECIPE_VERSION"
		declare -f "build_$1" "outputs_$1"
		echo "$GOVERSION $GOOS/$GOARCH"
		cat "$moddir/go.mod" "$moddir/go.sum"
	} | sha256sum | cut -c1-16
}

# outputs_present DIR GROUP reports whether all of GROUP's outputs exist in DIR.
outputs_present() {
	local o
	for o in $("outputs_$2"); do
		[[ -e "$1/$o" ]] || return 1
	done
}

# install_group SRC GROUP copies GROUP's outputs from SRC into BIN_DIR. Copies, not
# hardlinks, so nothing done to bin/ can corrupt the cache.
install_group() {
	local o
	for o in $("outputs_$2"); do
		rm -rf "${BIN_DIR:?}/$o.tmp"
		cp -R --reflink=auto "$1/$o" "$BIN_DIR/$o.tmp"
		rm -rf "${BIN_DIR:?}/$o"
		mv "$BIN_DIR/$o.tmp" "$BIN_DIR/$o"
	done
}

# prune_cache GROUP keeps the two newest cache entries of GROUP (the one just built
# and its predecessor), so the cache does not grow with every pin change.
prune_cache() {
	local old
	# shellcheck disable=SC2012 # names are ours: <group>-<hex key>
	for old in $(ls -1dt "$CACHE_ROOT/$1"-* 2>/dev/null | tail -n +3); do
		rm -rf "$old"
	done
}

# children_cpu PID prints the CPU seconds (user + system) of the finished children
# of shell PID, from /proc (0 where there is none): the figure a busy machine does
# not inflate the way it does wall time. PID, because $(…) runs in a subshell.
children_cpu() {
	local -a st
	if [[ -r /proc/$1/stat ]] && read -r -a st <"/proc/$1/stat"; then
		echo $(((st[15] + st[16]) / CLK_TCK))
	else
		echo 0
	fi
}
CLK_TCK="$(getconf CLK_TCK 2>/dev/null || echo 100)"

build_into_cache() {
	local group="$1" key="$2" cache="$3" tmp start cpu self=$BASHPID
	tmp="$(mktemp -d "$CACHE_ROOT/.tmp-$group-$key-XXXXXX")"
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '$tmp'" EXIT
	start=$SECONDS
	cpu="$(children_cpu "$self")"
	# A plain subshell, not an `if` condition: errexit must stay in force inside it.
	set +e
	(set -e; "build_$group" "$TOOLS_DIR/$group" "$tmp")
	local rc=$?
	set -e
	[[ $rc -eq 0 ]] || die "building $group failed (see the errors above; module tools/$group)"
	outputs_present "$tmp" "$group" || die "building $group produced no $("outputs_$group")"
	chmod 755 "$tmp" # mktemp made it private
	if ! mv -T "$tmp" "$cache" 2>/dev/null; then
		# Another build of the same key won the race; its entry is as good.
		[[ -d $cache ]] || die "cannot move $tmp to $cache"
		rm -rf "$tmp"
	fi
	trap - EXIT
	BUILT_SECONDS=$((SECONDS - start))
	BUILT_CPU=$(($(children_cpu "$self") - cpu))
}

process_group() {
	local group="$1" key cache stamp lock
	[[ -f "$TOOLS_DIR/$group/go.mod" ]] || die "unknown tool group '$group' (have: ${ALL_GROUPS[*]})"
	key="$(group_key "$group")"
	stamp="$BIN_DIR/.stamp-$group"
	if [[ -f $stamp && "$(<"$stamp")" == "$key" ]] && outputs_present "$BIN_DIR" "$group"; then
		echo "tools: $group up to date"
		return
	fi
	mkdir -p "$CACHE_ROOT"
	cache="$CACHE_ROOT/$group-$key"
	lock="$CACHE_ROOT/.lock-$group"
	# One build per group at a time, across checkouts sharing the cache.
	exec {lockfd}>"$lock"
	flock "$lockfd"
	if [[ -d $cache ]] && outputs_present "$cache" "$group"; then
		echo "tools: $group cached ($key)"
	else
		rm -rf "$cache"
		echo "tools: building $group ($key)…"
		build_into_cache "$group" "$key" "$cache"
		echo "tools: $group built in ${BUILT_SECONDS}s, ${BUILT_CPU} CPU-s ($key)"
		prune_cache "$group"
	fi
	rm -f "$stamp"
	install_group "$cache" "$group"
	echo "$key" >"$stamp"
	exec {lockfd}>&-
}

# build_lane GROUP... processes groups one after the other.
build_lane() {
	local g
	for g in "$@"; do
		process_group "$g"
	done
}

# kube is the longest build by far (its own lane); the other groups build one after
# another beside it. One `go build -p 2` does not keep two cores busy all the time —
# while it resolves and downloads modules, at the narrow end of a package graph, or
# while it links — and the other lane fills those gaps (measured:
# test/results/cold-start.md). A warm run only checks stamps in either lane.
others=()
for g in "${GROUPS_TO_BUILD[@]}"; do
	[[ $g == kube ]] || others+=("$g")
done
if [[ ${#others[@]} -eq ${#GROUPS_TO_BUILD[@]} || ${#others[@]} -eq 0 ]]; then
	build_lane "${GROUPS_TO_BUILD[@]}"
else
	# Both lanes are subshells, so a failing build (die) ends only its lane; the
	# other finishes what it started (and caches it) before this reports.
	build_lane kube &
	kube_lane=$!
	build_lane "${others[@]}" &
	other_lane=$!
	rc=0
	wait "$kube_lane" || rc=$?
	wait "$other_lane" || rc=$?
	[[ $rc -eq 0 ]] || die "building the tools failed (see above)"
fi
