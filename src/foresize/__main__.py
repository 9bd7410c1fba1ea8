from foresize.front.cli import main

main()
