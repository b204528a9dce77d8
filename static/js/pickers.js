// Pickers of services and versions (dashboard/pickers.py, templates/dashboard/_pickers.html).
// - A service input names its version inputs (data-version-inputs): as the service is
//   typed, they offer that service's versions (an unknown service: every version).
// - An input of several services, comma-separated (data-services-list), offers the next
//   service after those typed.
// - The bundle form's line picker (data-adds-line-to) adds "service version" as a line of
//   its textarea.
(function () {
  "use strict";
  var island = document.getElementById("version-lists");
  if (!island) return;
  var lists = JSON.parse(island.textContent);
  var names = Array.prototype.map.call(
    document.querySelectorAll("#service-names option"),
    function (option) { return option.value; }
  );

  function follow(service) {
    var list = lists[service.value.trim()] || "all-versions";
    service.dataset.versionInputs.split(" ").forEach(function (id) {
      var version = document.getElementById(id);
      if (version) version.setAttribute("list", list);
    });
  }
  document.querySelectorAll("input[data-version-inputs]").forEach(function (service) {
    service.addEventListener("input", function () { follow(service); });
  });

  document.querySelectorAll("input[data-services-list]").forEach(function (input) {
    var own = document.createElement("datalist");
    own.id = input.id + "-choices";
    input.after(own);
    input.setAttribute("list", own.id);
    function offer() {
      var cut = input.value.lastIndexOf(",");
      var typed = cut < 0 ? "" : input.value.slice(0, cut + 1) + " ";
      var chosen = typed.split(",").map(function (name) { return name.trim(); });
      own.replaceChildren.apply(own, names.filter(function (name) {
        return chosen.indexOf(name) < 0;
      }).map(function (name) {
        var option = document.createElement("option");
        option.value = typed + name;
        return option;
      }));
    }
    input.addEventListener("input", offer);
    offer();
  });

  document.querySelectorAll("[data-adds-line-to]").forEach(function (picker) {
    var lines = document.getElementById(picker.dataset.addsLineTo);
    var inputs = picker.querySelectorAll("input");
    picker.hidden = false;
    picker.querySelector("button").addEventListener("click", function () {
      var words = Array.prototype.map.call(inputs, function (input) {
        return input.value.trim();
      });
      if (words.indexOf("") >= 0) return;
      var text = lines.value.replace(/\s+$/, "");
      lines.value = (text ? text + "\n" : "") + words.join(" ") + "\n";
      inputs.forEach(function (input) { input.value = ""; });
      inputs[0].focus();
    });
  });
})();
