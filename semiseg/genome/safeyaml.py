"""YAML without aliases, for configs and label schemes (no torch: config.py and
genome/scheme.py both read YAML through it). An alias (*name) is refused before it
expands: a few hundred bytes of nested aliases expand to billions of nodes."""

from __future__ import annotations

import yaml


class YAMLAliasError(yaml.YAMLError):
    """An alias (*name) in a config or scheme: refused."""

    def __init__(self, line: int):
        super().__init__("YAML aliases (*name) are not allowed in semiseg configs and "
                         "schemes; write the value out")
        self.line = line


class NoAliasLoader(yaml.SafeLoader):
    """yaml's SafeLoader that refuses every alias before expanding it (anchors alone
    are harmless and read as usual)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise YAMLAliasError(self.peek_event().start_mark.line + 1)
        return super().compose_node(parent, index)
