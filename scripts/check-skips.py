#!/usr/bin/env python3
"""Fails a test run on a skip the allow-list does not name: a green run must mean it was tested.

Reads ctest's JUnit file, finds each skipped test's reason (the text a GoogleTest case printed
after "Skipped", or a script's "SKIPPED: ..." line), and looks for an allow-list entry whose test
pattern (shell glob) matches the name and whose reason pattern (regular expression) is found in
the reason. Prints every skip, allowed or not; exits 1 when one is not allowed, or when a test
did not run because its fixture's set-up failed (never a skip, whatever the allow-list says).

usage: scripts/check-skips.py JUNIT_XML [ALLOW_LIST]   (default: tests/allowed-skips.txt)
"""
import fnmatch
import os
import re
import sys
import xml.etree.ElementTree as ET

# A script's own skip line; the text after the marker is its reason.
SCRIPT_MARKER = re.compile(r"^\s*(?:\[  SKIPPED \]|SKIPPED:|SKIP:|skipped:)\s*(.*)$")


def read_allow_list(path):
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = [x.strip() for x in line.split(" | ")]
            if len(fields) != 3 or not all(fields):
                sys.exit(f"{path}:{number}: want 'TEST GLOB | REASON REGEX | WHY', got: {line}")
            entries.append((fields[0], re.compile(fields[1]), fields[2]))
    return entries


def gtest_reason(lines):
    """The message between GoogleTest's "file:line: Skipped" and its "[  SKIPPED ]" line."""
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped"):
            body = []
            for rest in lines[i + 1:]:
                if rest.startswith("[  SKIPPED ]"):
                    break
                body.append(rest.strip())
            return " ".join(x for x in body if x) or "(GoogleTest skip without a message)"
    return None


def skip_reason(case):
    skipped = case.find("skipped")
    out = case.findtext("system-out") or ""
    lines = out.splitlines()
    message = skipped.get("message", "") if skipped is not None else ""
    # A failed fixture set-up: the tests that need it did not run (the set-up itself failed).
    if message == "Fixture dependency failed":
        return "fixture dependency failed: " + " ".join(lines).strip()
    reason = gtest_reason(lines)
    if reason:
        return reason
    marked = [m.group(1).strip() for m in map(SCRIPT_MARKER.match, lines) if m]
    if marked:
        return marked[-1]
    rest = [x.strip() for x in lines if x.strip()]
    return rest[-1] if rest else f"(no reason printed; ctest: {message})"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    junit = sys.argv[1]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    allow_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(repo, "tests",
                                                                    "allowed-skips.txt")
    allow = read_allow_list(allow_path)
    unexpected = not_run = 0
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("skipped") is None:
            continue
        name = case.get("name", "")
        reason = skip_reason(case)
        # Not a skip at all: a set-up that should have worked failed (an engine that did not
        # start), so this test never ran. No allow-list entry can excuse it.
        if case.find("skipped").get("message", "") == "Fixture dependency failed":
            not_run += 1
            print(f"NOT RUN (its fixture failed, counted as a failure): {name}: {reason}")
            continue
        why = next((w for glob, pattern, w in allow
                    if fnmatch.fnmatchcase(name, glob) and pattern.search(reason)), None)
        if why:
            print(f"skipped (allowed: {why}): {name}: {reason}")
        else:
            unexpected += 1
            print(f"UNEXPECTED SKIP: {name}: {reason}")
    if unexpected:
        print(f"{unexpected} unexpected skip(s): fix the cause, or name the skip and why in "
              f"{os.path.relpath(allow_path, repo)} if it is a property of the machine")
    if not_run:
        print(f"{not_run} test(s) not run because their fixture failed: fix the fixture")
    return 1 if unexpected or not_run else 0


if __name__ == "__main__":
    sys.exit(main())
