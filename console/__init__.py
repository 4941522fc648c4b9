"""gpuconsole: a terminal operator console for SGLang model swaps on multi-GPU hosts.

The package root imports nothing heavy: `import console` never pulls in Textual or asyncssh.
"""

__version__ = "0.1.0"
