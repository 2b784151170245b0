#!/usr/bin/python3
"""The desktop tests' fixture: a GTK3 window with the controls they drive (reachable over
AT-SPI). Usage: app.py TITLE [--many N]. Prints "ready" once shown, then where its controls
are ("geom NAME X Y W H", screen pixels, again whenever the window moves); every change it
sees goes to stdout as one line, so a test checks what happened without asking gantry."""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

title = sys.argv[1]
many = int(sys.argv[sys.argv.index("--many") + 1]) if "--many" in sys.argv else 0


def say(line):
    print(line, flush=True)


win = Gtk.Window(title=title)
win.set_default_size(520, 420)
win.move(200, 120)
win.connect("destroy", Gtk.main_quit)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
box.set_border_width(10)
win.add(box)

status = Gtk.Label(label="status: idle")
box.pack_start(status, False, False, 0)

entry = Gtk.Entry()
entry.get_accessible().set_name("Message")
entry.connect("changed", lambda e: say("entry " + e.get_text()))
box.pack_start(entry, False, False, 0)

secret = Gtk.Entry()
secret.set_visibility(False)
secret.get_accessible().set_name("Secret")
secret.set_text("hunter2")
box.pack_start(secret, False, False, 0)

clicks = [0]


def pressed(_):
    clicks[0] += 1
    status.set_text("status: clicked %d" % clicks[0])
    say("clicked %d" % clicks[0])


button = Gtk.Button(label="Press me")
button.connect("clicked", pressed)
box.pack_start(button, False, False, 0)

check = Gtk.CheckButton(label="Agree")
check.connect("toggled", lambda c: say("agree %s" % c.get_active()))
box.pack_start(check, False, False, 0)

scale = Gtk.Scale.new_with_range(Gtk.Orientation.HORIZONTAL, 0, 100, 1)
scale.set_draw_value(False)
scale.get_accessible().set_name("Level")
scale.connect("value-changed", lambda s: say("level %d" % s.get_value()))
box.pack_start(scale, False, False, 0)

rows = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
for i in range(60):
    rows.pack_start(Gtk.Label(label="row %d" % i), False, False, 0)
scroller = Gtk.ScrolledWindow()
scroller.set_min_content_height(120)
scroller.add(rows)
scroller.get_vadjustment().connect("value-changed", lambda a: say("scrolled %d" % a.get_value()))
box.pack_start(scroller, True, True, 0)

if many:
    # All of them on screen at once (toolkits report only what shows as shown).
    win.set_default_size(1240, 780)
    win.move(10, 10)
    scroller.set_min_content_height(40)
    css = Gtk.CssProvider()
    css.load_from_data(b"grid button { padding: 0 2px; min-height: 0; min-width: 0; }")
    Gtk.StyleContext.add_provider_for_screen(win.get_screen(), css, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)
    grid = Gtk.Grid()
    for i in range(many):
        grid.attach(Gtk.Button(label=str(i)), i % 25, i // 25, 1, 1)
    box.pack_start(grid, False, False, 0)

accel = Gtk.AccelGroup()
win.add_accel_group(accel)
key, mods = Gtk.accelerator_parse("<Control><Shift>k")
accel.connect(key, mods, 0, lambda *a: (status.set_text("status: chord"), say("chord"), True)[-1])

def report():
    origin = win.get_window().get_origin()
    for name, widget in (("entry", entry), ("button", button), ("slider", scale), ("rows", scroller)):
        a = widget.get_allocation()
        say("geom %s %d %d %d %d" % (name, origin.x + a.x, origin.y + a.y, a.width, a.height))
    say("ready")
    return False


pending = [None]


def configured(*_):
    # Once the window manager has placed the window (and after every move), say where.
    if pending[0] is not None:
        GLib.source_remove(pending[0])
    pending[0] = GLib.timeout_add(150, lambda: (pending.__setitem__(0, None), report())[-1])
    return False


win.connect("configure-event", configured)
win.show_all()
Gtk.main()
