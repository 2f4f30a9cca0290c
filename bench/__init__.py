"""Speed and load scripts of the kit (`make bench`): not part of any product package."""
