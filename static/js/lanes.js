// The lane editor: a member row's version suggests the versions of the service chosen in
// that row (the page has a datalist per service; without this, every version).
(function () {
  "use strict";
  var lists = JSON.parse(document.getElementById("lane-version-lists").textContent);
  document.querySelectorAll("input[data-version-input]").forEach(function (service) {
    service.addEventListener("input", function () {
      var version = document.getElementById(service.dataset.versionInput);
      version.setAttribute("list", lists[service.value.trim()] || "lane-versions");
    });
  });
})();
