"""The finders of secrets named by what they are for; `memory.language.purpose_rules` is their table."""
