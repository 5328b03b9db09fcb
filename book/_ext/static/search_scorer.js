/* The book's search scorer (Sphinx's html_search_scorer; book/_ext/search_prose.py sets it).
 *
 * Sphinx's own weights, and one change: a hit in the glossary ranks just below a hit of the same
 * score on another page. search_prose.py indexes each glossary term both on its glossary entry and
 * on the page that introduces it, at the same score, so a search for the term lists that page
 * first and its glossary entry right after.
 */
var Scorer = {
  score: (result) => {
    const [docname, _title, _anchor, _descr, score] = result;
    return docname.split("/").pop() === "glossary" ? score - 0.5 : score;
  },

  // Sphinx 7.4's defaults (searchtools.js), which a scorer must restate.
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {
    0: 15,
    1: 5,
    2: -5,
  },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
