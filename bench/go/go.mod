module shortcut.bench/gobench

go 1.19
