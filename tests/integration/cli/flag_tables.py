#!/usr/bin/python3
"""Every flag of the training commands is declared once: where `gpulab train`, `bench train`,
`plan`, `launch`, `ddp` and `slurm submit` take the same flag, their --help shows the same
declaration (value type, allowed values and description; defaults may differ where a command's
job differs). Prints the flags compared and exits 1 naming each flag declared two ways.

  flag_tables.py GPULAB
"""
import re
import subprocess
import sys

COMMANDS = [["train"], ["bench", "train"], ["plan"], ["launch"], ["ddp"], ["slurm", "submit"]]
# An option line: two spaces, the flag (with any kebab alias), then its type, check and default.
OPTION = re.compile(r"^  (--[a-z0-9_]+)(?:,--[a-z0-9-]+)?((?: [A-Z][^ ]*(?: \.\.\.)?)?)(?:\s{2,}(.*))?$")


def declarations(gpulab, command):
    out = subprocess.run([gpulab, *command, "--help"], capture_output=True, text=True, check=True)
    flags, last = {}, None
    for line in out.stdout.splitlines():
        m = OPTION.match(line)
        if m:
            spec = re.sub(r"=.*$", "", m.group(2).strip())  # the default may differ
            last = m.group(1)
            flags[last] = [spec, (m.group(3) or "").strip()]
        elif last and line.startswith(" " * 30) and not flags[last][1]:
            flags[last][1] = line.strip()  # the description on the next line
        else:
            last = None
    return flags


def main():
    gpulab = sys.argv[1]
    seen = {}  # flag -> {declaration: [commands]}
    for command in COMMANDS:
        for flag, decl in declarations(gpulab, command).items():
            if flag == "--help":
                continue
            seen.setdefault(flag, {}).setdefault(tuple(decl), []).append(" ".join(command))
    shared = {f: d for f, d in seen.items() if sum(len(c) for c in d.values()) > 1}
    bad = {f: d for f, d in shared.items() if len(d) > 1}
    for flag, decls in sorted(bad.items()):
        print(f"{flag} is declared {len(decls)} ways:")
        for (spec, text), commands in decls.items():
            print(f"  {', '.join(commands)}: {spec or '(flag)'}  {text}")
    print(f"{len(shared)} flags taken by more than one training command, {len(bad)} declared "
          f"more than one way")
    # The parser must see what it compares: --model in train, bench train and plan.
    model = sum(len(c) for c in seen.get("--model", {}).values())
    if model < 3 or len(shared) < 20:
        print(f"the --help parser found --model {model} times and {len(shared)} shared flags: "
              "has the help format changed?")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
