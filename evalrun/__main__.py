from evalrun.cli import entry

entry()
