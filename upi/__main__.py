from upi.cli import main

main()
