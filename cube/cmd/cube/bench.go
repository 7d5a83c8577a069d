package main

import (
	"errors"
	"io"
)

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := flags("bench", "--against redis --keys N --value-size B --batch K --duration D", stdout, stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	return errors.New("not implemented yet")
}
