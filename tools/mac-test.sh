#!/usr/bin/env bash
# tools/mac-test.sh — the tests that need a real Mac (called by
# `./build.sh mac-test`; see docs/metal.md). It builds dist/StartLux.app,
# then runs with -tags mactest:
#   ./metal   every kernel and whole-model test on the GPU instead of the
#             emulator, against the CPU backend and the goldens (all cases:
#             STARTLUX_METAL_FULL=1), the demo decisions, what the device
#             reports and where the driver puts weights
#   ./gpucheck  the check a daemon runs before it serves on the GPU, the
#             demo model's pass included, must pass
#   ./daemon  (TestMac only) a daemon with --backend auto's arrangement
#             serves the demo decisions on the GPU, no backend note
#   ./cpu     Accelerate is the BLAS loaded, and agrees with the Go GEMM
#   ./model, ./decide   the goldens and demo decisions on Accelerate
#   ./app     the tray's menu in a real NSMenu, a click through AppKit, and
#             the SMAppService statuses read by the built app
# and `startlux doctor` from the bundle. It writes $MAC_TEST_OUT (default
# dist/mac-test): report.md, doctor.json, and one log per package. The exit
# status is non-zero when anything failed; the report is written either way.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -s)" != Darwin ]; then
	echo "mac-test: these tests need macOS (Apple Silicon for Metal); this is $(uname -s)" >&2
	exit 2
fi
out=${MAC_TEST_OUT:-dist/mac-test}
rm -rf "$out"
mkdir -p "$out"
status=0
if ! ./build.sh app >"$out/build-app.log" 2>&1; then
	echo "mac-test: ./build.sh app failed (see $out/build-app.log)" >&2
	status=1
fi
export STARTLUX_MAC_APP=$PWD/dist/StartLux.app STARTLUX_METAL_FULL=1
pkgs=(metal gpucheck daemon cpu model decide app)
for p in "${pkgs[@]}"; do
	run=()
	[ "$p" = daemon ] && run=(-run '^TestMac') # the rest of ./daemon is not Mac-specific
	echo "mac-test: go test -tags mactest ${run[*]} ./$p" >&2
	go test -tags mactest -count=1 -timeout 40m -v "${run[@]}" "./$p" >"$out/test-$p.log" 2>&1 || status=1
done
helper=$STARTLUX_MAC_APP/Contents/Helpers/startlux
"$helper" doctor --json >"$out/doctor.json" 2>"$out/doctor.err" || status=1
"$helper" doctor >"$out/doctor.txt" 2>&1 || status=1

{
	echo "# StartLux on a Mac"
	echo
	echo '```'
	echo "date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit:   $(git rev-parse HEAD 2>/dev/null)"
	echo "macOS:    $(sw_vers -productVersion) ($(sw_vers -buildVersion))"
	echo "machine:  $(uname -m), $(sysctl -n machdep.cpu.brand_string 2>/dev/null)"
	echo "go:       $(go version)"
	echo '```'
	echo
	echo "## startlux doctor"
	echo
	echo '```'
	cat "$out/doctor.txt"
	echo '```'
	for p in "${pkgs[@]}"; do
		echo
		echo "## go test -tags mactest ./$p"
		echo
		echo '```'
		# Every test's verdict, the package's, and anything that crashed.
		grep -E '^\s*--- (PASS|FAIL)|^(ok|FAIL)\s|^panic:|^fatal error:' "$out/test-$p.log" || echo "(no results: see test-$p.log)"
		echo '```'
	done
} >"$out/report.md"
echo "mac-test: report in $out/report.md" >&2
exit $status
