"""A stand-in for a fine-tune: reports a metric, writes a result file."""
import json, os, sys, time

out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "results"
os.makedirs(out, exist_ok=True)
for step in range(3):
    print(json.dumps({"metric": "loss", "value": 2.0 / (step + 1)}), flush=True)
    time.sleep(0.1)
with open(os.path.join(out, "adapter.txt"), "w") as f:
    f.write("rank %s done\n" % os.environ.get("VASTFLEET_NODE_RANK", "0"))
print(json.dumps({"found": {"final_loss": 0.67}}), flush=True)
