"""Text in English and Chinese, with no I/O: vocabulary, the GATED pre-filter, the recall
trigger, lexical analysis, redaction, script handling and quoting."""
