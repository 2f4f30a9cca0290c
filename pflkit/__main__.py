from pflkit.cli import main

main()
