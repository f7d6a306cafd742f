module shortcut.test/goaccel

go 1.19
