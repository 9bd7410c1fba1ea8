from foresize.cli import main

main()
