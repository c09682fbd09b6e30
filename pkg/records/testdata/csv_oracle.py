"""Reads CSV files with Python's csv module, the independent reader that
records' TestCSVDialects holds its CSV reading to.

Each argument is a JSON object: {"file", "delimiter", "quote" (null: no
quoting), "escape" (null: a quote doubled)}. Prints, per argument, one JSON
line: {"rows": [[field, ...], ...]} or {"error": "..."}. Files are opened
with newline='' so that line ends inside quoted fields are kept as written,
as the csv module's documentation asks.
"""
import csv
import json
import sys

for arg in sys.argv[1:]:
    spec = json.loads(arg)
    kwargs = {"delimiter": spec["delimiter"], "strict": True}
    if spec["quote"] is None:
        kwargs["quoting"] = csv.QUOTE_NONE
    else:
        kwargs["quotechar"] = spec["quote"]
    if spec["escape"] is not None:
        kwargs["escapechar"] = spec["escape"]
        kwargs["doublequote"] = False
    try:
        with open(spec["file"], newline="", encoding="utf-8") as f:
            rows = [row for row in csv.reader(f, **kwargs) if row]
        print(json.dumps({"rows": rows}))
    except (csv.Error, UnicodeDecodeError) as e:
        print(json.dumps({"error": str(e)}))
