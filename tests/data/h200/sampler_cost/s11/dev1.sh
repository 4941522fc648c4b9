python3 -c "import pynvml" 2>/dev/null || pip install -q --no-index .whl/nvidia_ml_py-*.whl
S=.whl/s9; T=.whl/s11; uptime; nproc
python3 benchmarks/gpu_sampler_cost.py $OUT/c1 --sampler three=$S/stand_three.py --sampler shipped=$T/shipped.py --sampler still1w=$T/still1w.py --sampler hb2=$T/still1w_hb2.py --interval 1.0 --warmup 3 --samples 20 --rounds 2 --oneshot 8 2>&1 | tee $OUT/c1.log | tail -4
rm -f $OUT/c1/*.jsonl; ls $OUT/c1
