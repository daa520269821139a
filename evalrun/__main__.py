from evalrun.cli import main

main()
