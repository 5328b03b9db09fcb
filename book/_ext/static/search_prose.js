/* The snippet under a search result quotes the result's prose, not its code, its TeX or the
 * page's menus.
 *
 * Sphinx's search page cuts that snippet from the text of the result's page (Search.htmlToText in
 * searchtools.js), which is everything in the page's main element: the theme's table of contents
 * for the page as well as the article. Before it does, this script keeps only the article and
 * drops what book/_ext/search_prose.py keeps out of the search index: code cells (source and
 * outputs), code blocks and display formulas; an inline formula becomes "…". A hit on a glossary
 * entry quotes the entry's definition, not its name alone. Loaded on the search page only.
 */
"use strict";
(() => {
  const DROPPED = [".cell", "div.highlight", "pre", "div.math"];

  // A glossary hit's anchor is the term itself (a <dt>): quote its definition with it.
  const withDefinition = (term) => {
    let definition = term.nextElementSibling;
    while (definition && definition.tagName === "DT") definition = definition.nextElementSibling;
    if (definition && definition.tagName === "DD") term.append(": ", ...definition.cloneNode(true).childNodes);
  };

  const prose = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    const main = page.querySelector('[role="main"]');
    const article = main?.querySelector("article");
    if (article) main.replaceChildren(article);
    page.querySelectorAll(DROPPED.join(",")).forEach((element) => element.remove());
    page.querySelectorAll("span.math").forEach((element) => element.replaceWith("…"));
    let target = null;
    try {
      target = anchor ? main?.querySelector(anchor) : null;
    } catch (error) {
      // an id that is no CSS selector: searchtools.js falls back to the whole page
    }
    if (target?.tagName === "DT") withDefinition(target);
    return page.documentElement.outerHTML;
  };

  const install = () => {
    // searchtools.js declares Search at the top level of its script, so it is a global name.
    if (typeof Search === "undefined" || Search.quotesProse) return;
    const htmlToText = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => htmlToText(prose(htmlString, anchor), anchor);
    Search.quotesProse = true;
  };

  document.addEventListener("DOMContentLoaded", install);
})();
