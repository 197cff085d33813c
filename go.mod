module github.com/startlux/startlux

go 1.26.0

require (
	fyne.io/systray v1.12.2
	github.com/dlclark/regexp2/v2 v2.13.0
	github.com/ebitengine/purego v0.11.3
	github.com/vmihailenco/msgpack/v5 v5.4.1
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.44.0
)

require (
	github.com/godbus/dbus/v5 v5.1.0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
