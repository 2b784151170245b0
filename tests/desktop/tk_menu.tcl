# A Tk application with a popup menu posted over the bare desktop, for the desktop tests:
# Tk's menus are top-level windows of their own, override-redirect, whose class is `Menu`,
# not the application's. Arguments: the menu's screen position (x y) and a file the chosen
# item appends a line to.
lassign $argv x y log
wm title . "gantry tk fixture"
wm geometry . 220x80+900+600
label .l -text "tk fixture"
pack .l
menu .m -tearoff 0 -background "#d9d9d9"
.m add command -label "Chosen item with a long label" -command [list apply {{log} {
    set f [open $log a]
    puts $f chosen
    close $f
}} $log]
.m add command -label "Second item"
update
after 300 [list .m post $x $y]
