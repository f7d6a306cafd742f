module shortcut.test/rthttp

go 1.19
