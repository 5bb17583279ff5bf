"""The options Spark 3.5's file readers know (csv, json, parquet, orc, avro, text and every file
source), so a misspelt `reader_options` key in load.json is pointed out: Spark ignores an option it
does not know, without a word, and the batch is read as if it were not there."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

KNOWN = frozenset(
    name.lower()
    for name in (
        # every file source
        "pathGlobFilter", "recursiveFileLookup", "modifiedBefore", "modifiedAfter",
        "ignoreCorruptFiles", "ignoreMissingFiles", "basePath", "mergeSchema",
        "datetimeRebaseMode", "int96RebaseMode", "compression", "codec",
        # csv
        "sep", "delimiter", "encoding", "charset", "quote", "escape", "comment", "header",
        "inferSchema", "preferDate", "enforceSchema", "ignoreLeadingWhiteSpace",
        "ignoreTrailingWhiteSpace", "nullValue", "nanValue", "positiveInf", "negativeInf",
        "dateFormat", "timestampFormat", "timestampNTZFormat", "enableDateTimeParsingFallback",
        "maxColumns", "maxCharsPerColumn", "mode", "columnNameOfCorruptRecord", "multiLine",
        "charToEscapeQuoteEscaping", "samplingRatio", "emptyValue", "locale", "lineSep",
        "unescapedQuoteHandling", "escapeQuotes", "quoteAll",
        # json
        "timeZone", "primitivesAsString", "prefersDecimal", "allowComments",
        "allowUnquotedFieldNames", "allowSingleQuotes", "allowNumericLeadingZeros",
        "allowBackslashEscapingAnyCharacter", "allowUnquotedControlChars", "allowNonNumericNumbers",
        "dropFieldIfAllNull", "useUnsafeRow",
        # avro, orc, parquet, text
        "avroSchema", "ignoreExtension", "positionalFieldMatching", "avroSchemaUrl", "wholetext",
    )
)  # fmt: skip


def unknown(names: Iterable[str]) -> list[str]:
    """A sentence for each option name no Spark file reader knows, with the likely one."""
    found = []
    for name in names:
        if name.lower() in KNOWN:
            continue
        close = difflib.get_close_matches(name.lower(), KNOWN, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        found.append(
            f"reader_options {name!r} is no option of Spark's file readers{hint}; Spark ignores it "
            "and reads the batch as if it were not there"
        )
    return found
