#!/usr/bin/env bash
# One lent GPU session's share of the issue #16 measurements, as one `run` command (carry .gpu-kit,
# made here by `make gpu-kit`; timeout_s 570). A session has 15 minutes of device time, the machine's
# start included, and one command at most 10, so each plan fits one command and ends by itself:
#   benchmarks/gpu-session.sh models [SECONDS [ARGS...]]   SD 1.5's UNet eager and the VQA batch-size sweep, then its
#       UNet compiled in the default mode, then SD 2.1's UNet eager if a minute is left
#   benchmarks/gpu-session.sh compare [SECONDS [ARGS...]]  the authors' loop and auditor overlapped side by side at
#       31 sets x 8 images, one run each (about 6.5 minutes on an H100)
# SECONDS (default 550) is when the last part must have ended; ARGS go to every part (--tiny on a CPU). Each part writes its results and log into
# $OUT as it ends, so a part cut short costs only itself; the end of every log is printed last.
set -uo pipefail
shopt -s nullglob
plan=${1:?usage: benchmarks/gpu-session.sh models|compare [seconds]}
end=$((SECONDS + ${2:-550}))
shift $(($# < 2 ? $# : 2))
extra=("$@")
out=${OUT:?OUT names the folder whose files come back from the device machine}

# part NAME BY ARGS...: the benchmark with ARGS, ended BY seconds after this script started (or at the end, if
# sooner); left out when under a minute of that is left (building the models alone takes about that long).
part() {
    local name=$1 by=$(($2 < end ? $2 : end)) status
    shift 2
    if ((by - SECONDS < 60)); then
        echo "$name: left out ($((by - SECONDS)) s were left)"
        return
    fi
    timeout $((by - SECONDS)) benchmarks/on-device.sh --models /tmp/bench-models --out "$out/$name.json" "$@" "${extra[@]}" \
        >"$out/$name.log" 2>&1
    status=$?
    echo "$name: exit $status at $SECONDS s$( ((status == 124)) && echo ' (cut at its time limit)')"
    ((status > worst)) && worst=$status
}
worst=0  # the session exits with its worst part's status (0 when every part that ran ended well)

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$out/gpu.txt" 2>&1
case $plan in
models)
    part sd15-eager 270 --t2i sd15 --only unet vqa --no-compile
    part sd15-compiled 480 --t2i sd15 --only unet --compile
    part sd21-eager "$end" --t2i sd21 --only unet --no-compile
    ;;
compare)
    part sd15-31x8 "$end" --t2i sd15 --only authors auditor-overlapped --sets 31 --images 8 --repeats 1 --no-compile
    ;;
*)
    echo "unknown plan '$plan': models or compare" >&2
    exit 2
    ;;
esac
for log in "$out"/*.log; do
    echo "== $log"
    tail -n 12 "$log"
done
exit "$worst"
