"""The front: the command line (`cli`) and the HTML and terminal report (`report`)."""
