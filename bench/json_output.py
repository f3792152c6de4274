# The JSON a command printed, as bench/compare and bench/gpu_check_report.py read it: one whole
# document (gpu-test --json prints it indented), else the last line that holds one (reference
# scripts print progress first; torchrun --tee prefixes each rank's lines, "[default0]:{...}").
import json


def json_output(text):
    """The document in text, or None when it holds none."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        if '{"' not in line:
            continue
        try:
            return json.loads(line[line.index('{"'):])
        except ValueError:
            continue
    return None
