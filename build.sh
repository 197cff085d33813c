#!/usr/bin/env bash
# build.sh — the project's commands. See README.md.
#
#   ./build.sh run     build startlux and run the daemon on the embedded demo model
#   ./build.sh test    vet and test everything (what CI runs)
#   ./build.sh app     build, sign and zip dist/StartLux.app (cross-compiled for macOS)
#   ./build.sh bench   run the benchmarks that docs/benchmarks.md reports
#   ./build.sh mac-test  on a Mac: the tests that need one, and a report (tools/mac-test.sh)
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0

cmd=${1:-}
[ $# -gt 0 ] && shift

case "$cmd" in
run)
	mkdir -p bin
	go build -trimpath -o bin/startlux ./cmd/startlux
	exec ./bin/startlux serve "$@"
	;;
test)
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
		GOARCH=arm64 QEMU_CPU=max QEMU_LD_PREFIX=$arm64_root go test -count=1 -timeout 30m -exec qemu-aarch64 "$@" ./cpu
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
