export const contactHandlers = {};
