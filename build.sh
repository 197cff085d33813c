#!/usr/bin/env bash
# build.sh — the project's commands. See README.md.
#
#   ./build.sh run     build startlux and run the daemon on the embedded demo model
#   ./build.sh test    install what the tests need (Debian, as root), vet and
#                      test everything (what CI runs)
#   ./build.sh app     build, sign and zip dist/StartLux.app (cross-compiled for macOS)
#   ./build.sh bench   run the benchmarks that docs/benchmarks.md reports
#   ./build.sh mac-test  on a Mac: the tests that need one, and a report (tools/mac-test.sh)
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0

cmd=${1:-}
[ $# -gt 0 ] && shift

# missing_test_deps prints what the tests need that this machine lacks, one
# "what (Debian package)" a line: the Metal kernel emulator's clang 19, the
# CPU backend's BLAS, the Linux tray's D-Bus, X server, panel, clicker and
# screenshot tool, qemu-user and an aarch64 loader for the arm64 tests, Node.js for the protocol
# client example.
missing_test_deps() {
	has() { command -v "$1" >/dev/null 2>&1; }
	clang19() { has clang++-19 || { has clang++ && clang++ --version 2>/dev/null | grep -q 'version 19\.'; }; }
	clang19 || echo "clang++-19 (clang-19)"
	has node || echo "node (nodejs)"
	has npm || echo "npm (npm)"
	[ "$(uname -s)" = Linux ] || return 0
	ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' || echo "libopenblas.so.0 (libopenblas0)"
	has dbus-daemon || echo "dbus-daemon (dbus)"
	has dbus-launch || echo "dbus-launch (dbus-x11)"
	has Xvfb || echo "Xvfb (xvfb)"
	has xfce4-panel || echo "xfce4-panel (xfce4-panel)"
	has xdotool || echo "xdotool (xdotool)"
	has import || echo "import (imagemagick)"
	has qemu-aarch64 || echo "qemu-aarch64 (qemu-user)"
	[ "$(uname -m)" = aarch64 ] || [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] ||
		echo "the aarch64 loader for qemu (libc6-arm64-cross)"
	has useradd || echo "useradd (passwd)"
}

# ensure_test_deps installs what the tests need when it can (Debian, as
# root or with sudo) and the Node.js example's dependency, or stops with one
# message listing what is missing.
ensure_test_deps() {
	local missing
	missing=$(missing_test_deps)
	if [ -n "$missing" ] && command -v apt-get >/dev/null 2>&1; then
		local sudo=""
		if [ "$(id -u)" -ne 0 ]; then
			sudo -n true 2>/dev/null && sudo="sudo -n"
		fi
		if [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; then
			local pkgs
			pkgs=$(printf '%s\n' "$missing" | sed -n 's/.*(\(.*\))$/\1/p' | sort -u | tr '\n' ' ')
			echo "build.sh: installing $pkgs" >&2
			export DEBIAN_FRONTEND=noninteractive
			$sudo apt-get update -qq >&2 || true
			$sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null || true
			missing=$(missing_test_deps)
		fi
	fi
	if [ -n "$missing" ]; then
		{
			echo "build.sh test: the tests need what this machine lacks (and cannot be installed here):"
			printf '%s\n' "$missing" | sed 's/^/  /'
			echo "On Debian, as root: apt-get install$(printf '%s\n' "$missing" | sed -n 's/.*(\(.*\))$/ \1/p' | sort -u | tr -d '\n')"
			echo "(go test ./... runs without them: the tests that need them skip, saying why)"
		} >&2
		exit 1
	fi
	local msgpack=examples/node-client/node_modules/@msgpack/msgpack/package.json
	if [ ! -f "$msgpack" ] || [ "${CI:-}" = true ]; then
		if ! npm ci --prefix examples/node-client --no-audit --no-fund --silent >&2; then
			echo "build.sh test: npm ci --prefix examples/node-client failed: the Node.js client example needs @msgpack/msgpack (package-lock.json)" >&2
			exit 1
		fi
	fi
}

case "$cmd" in
run)
	mkdir -p bin
	go build -trimpath -o bin/startlux ./cmd/startlux
	exec ./bin/startlux serve "$@"
	;;
test)
	ensure_test_deps
	unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
	if [ -n "$unformatted" ]; then
		echo "gofmt would change:" $unformatted >&2
		exit 1
	fi
	go vet ./...
	# Every release target must build without cgo.
	for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
		GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./...
	done
	go test -count=1 -timeout 30m "$@" ./...

	# --- arm64 kernels (cpu's SDOT int8 tile) under qemu-user, on Linux
	# hosts that are not arm64 themselves. The test binary is dynamically
	# linked (purego), so qemu needs an aarch64 loader: Debian's qemu-user
	# and libc6-arm64-cross.
	if [ "$(go env GOHOSTOS)" = linux ] && [ "$(go env GOHOSTARCH)" != arm64 ]; then
		arm64_root=/usr/aarch64-linux-gnu
		if ! command -v qemu-aarch64 >/dev/null || [ ! -e "$arm64_root/lib/ld-linux-aarch64.so.1" ]; then
			echo "build.sh test: the arm64 tests need qemu-aarch64 and $arm64_root (apt-get install qemu-user libc6-arm64-cross)" >&2
			exit 1
		fi
		# No arm64 system BLAS is installed for qemu, so the tests that need
		# one skip here (CI= keeps them from failing as a missing tool would).
		CI= GOARCH=arm64 QEMU_CPU=max QEMU_LD_PREFIX=$arm64_root go test -count=1 -timeout 30m -exec qemu-aarch64 "$@" ./cpu
	fi
	# --- end of the arm64 block
	;;
app)
	exec ./build-app.sh "$@"
	;;
mac-test)
	exec ./tools/mac-test.sh "$@"
	;;
bench)
	mkdir -p bin
	go build -trimpath -o bin/startlux ./cmd/startlux
	exec ./bin/startlux bench "${@:-all}"
	;;
*)
	echo "usage: ./build.sh run|test|app|bench|mac-test [args]" >&2
	exit 2
	;;
esac
