"""The command-line parser of vmm-ci and vmm-bench: argparse, but a usage
error is one line (the program, what is wrong, where to read more) and
exit status 2, as the VMM's own."""
import argparse


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (--help for usage)\n")
