#!/bin/bash
# One device call: the smoke checks of train_demo.py, then every variant in $VARIANTS trained at the same time
# on the one GPU, each exporting, evaluating (transformers, fp32) and writing goldens; results under $OUT.
#   VARIANTS="a: b:HIDDEN=192+LAYERS=8 c:BOOST=choice/city:0.1,choice/largest:0.3" tools/demo/run_demo.sh
# (a variant is NAME:SETTINGS, its settings joined by '+')
# Expects tok/ (make_tokenizer.py's output) and eval/demo-tasks.jsonl beside tools/ (the folder it is run from).
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false TOKDIR=$PWD/tok EVALFILE=$PWD/eval/demo-tasks.jsonl
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv,noheader
python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
if [ -z "$SKIP_SMOKE" ]; then
  VARIANT=smoke timeout 150 python3 tools/demo/train_demo.py smoke > $OUT/log-smoke.txt 2>&1
  echo "smoke rc=$? at $(el)s"
  grep -E "EQUIV|RATE|^IMPL|BESTMODE|^SMOKE|TPAD|bad rows|dry run|built in|tokens:|load into" $OUT/log-smoke.txt
  grep -E "Error|Traceback" -A4 $OUT/log-smoke.txt | head -30
  IMPL=${IMPL:-$(sed -n 's/^IMPL //p' $OUT/log-smoke.txt)}
  MODE=${MODE:-$(sed -n 's/^BESTMODE //p' $OUT/log-smoke.txt)}
  grep -q "^SMOKE ok" $OUT/log-smoke.txt || { echo "smoke failed: no training"; exit 1; }
fi
export IMPL=${IMPL:-hf} MODE=${MODE:-eager}
POST=${POST:-150}
TS=$(( ${END_AT:-585} - $(el) - POST )); [ -n "$TRAIN_SECONDS" ] && TS=$TRAIN_SECONDS
export TRAIN_SECONDS=$TS W_FLAG=${W_FLAG:-1.0} W_LETTER=${W_LETTER:-0.5} W_QTY=${W_QTY:-0.3} \
  W_BIND=${W_BIND:-0.5} W_QQTY=${W_QQTY:-0.3} W_QLIST=${W_QLIST:-0.5} LR=${LR:-2e-3} BATCH=${BATCH:-256} WORKERS=${WORKERS:-4}
echo "training: IMPL=$IMPL MODE=$MODE TRAIN_SECONDS=$TS variants: $VARIANTS"
for spec in $VARIANTS; do
  name=${spec%%:*}; settings=${spec#*:}
  env $(echo "$settings" | tr '+' ' ') VARIANT=$name timeout $(( TS + POST - 5 )) \
    python3 tools/demo/train_demo.py train > $OUT/log-$name.txt 2>&1 &
done
wait
echo "variants done at $(el)s"
for spec in $VARIANTS; do
  name=${spec%%:*}
  echo "== $name"; grep -E "RATE|probe final|Error|Traceback|resumed" $OUT/log-$name.txt | cut -c1-600
  grep "REPORT" $OUT/log-$name.txt | sed 's/.*REPORT //' | python3 -c "
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    t = {k: v['accuracy'] for k, v in d['test'].items()}
    e = {k: v['accuracy'] for k, v in d.get('eval_file', {}).get('results', {}).items()}
    print('steps', d['steps'], 'temps', d['temperatures']); print('test', t); print('eval file', e)"
done
tar czf $OUT/logs.tar.gz -C $OUT $(cd $OUT && ls log-*.txt) && rm -f $OUT/log-*.txt
ls -la $OUT
