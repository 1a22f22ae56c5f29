// claude-memory's review page works without this script; it only adds
// keyboard shortcuts: "/" focuses the search box of the page, if it has one.
"use strict";
document.addEventListener("keydown", function (event) {
  if (event.key !== "/" || event.target.closest("input, textarea")) {
    return;
  }
  var box = document.querySelector("input[type=search]");
  if (box) {
    event.preventDefault();
    box.focus();
  }
});
