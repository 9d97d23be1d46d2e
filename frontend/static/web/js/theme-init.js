// Runs before first paint (classic blocking script): apply the theme the user chose last time.
(function () {
  try {
    var saved = localStorage.getItem("theme");
    if (saved === "dark" || saved === "light") document.documentElement.dataset.theme = saved;
  } catch (e) { /* storage disabled: follow prefers-color-scheme */ }
})();
